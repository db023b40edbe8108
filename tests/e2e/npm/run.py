#!/usr/bin/env python3
"""wakeful from npm, as agent users get it, offline.

Serves the tarballs `packaging/dist.mjs` made (DIST/npm/*.tgz) from a local npm
registry (fake_registry.py) and installs them with the real npm into a
temporary prefix, with a PATH that has node and npm but no cargo; then checks:

  install      `npm install -g wakeful`: npm installs the platform package of this
               machine and skips the others (a platform package for another cpu,
               --decoy, is in the registry and in wakeful's optionalDependencies);
               no package has an install script; `wakeful --version` names VERSION
  npx          `npx wakeful watch …` runs the global install without fetching, and
               `npx -y wakeful@VERSION watch …` with an empty npm cache and no
               global install fetches it from the registry and runs it; output and
               exit code are the monitor's
  mcp          the MCP Python SDK's check (tests/e2e/mcp-python/check.py) against
               `wakeful mcp` through the launcher
  exit-codes   the launcher ends as the binary does: for an exit code, a usage
               error, an unknown monitor, a reader that went away (SIGPIPE), a
               binary killed by SIGKILL; stdin and argv reach the binary unchanged
  signals      Ctrl-C (SIGINT to the process group, as a terminal sends it) ends
               `wakeful watch` with 130 and stops its monitor; SIGINT and SIGTERM
               sent to the launcher alone are passed on (130, 143)
  plugin       the package is a Claude Code plugin that `wakeful validate` finds
               without error or warning, and its commands run the package's own
               launcher

Usage: run.py --dist DIR --version VERSION --native PATH --out DIR [--decoy NAME]
`--native` is the binary the packages were made from: each exit-code and signal
case runs it too, and the launcher must end the same way. Prints PASS/FAIL per
scenario and exits 0 when all passed. Standard library only.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "../../.."))
sys.path.insert(0, HERE)
import fake_registry  # noqa: E402

DEADLINE_S = 30


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def wait_for(cond, what, limit=DEADLINE_S):
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            raise Failed(f"timed out waiting for {what}")
        time.sleep(0.02)


class Harness:
    def __init__(self, a):
        self.version = a.version
        self.native = os.path.abspath(a.native)
        self.decoy = a.decoy
        self.out = os.path.abspath(a.out)
        shutil.rmtree(self.out, ignore_errors=True)
        for d in ("nodebin", "prefix", "cache", "empty", "wk"):
            os.makedirs(os.path.join(self.out, d))
        # node, npm and npx only: no cargo, no rustc, no wakeful.
        for tool in ("node", "npm", "npx"):
            found = shutil.which(tool)
            check(found, f"{tool} is not on PATH")
            os.symlink(found, os.path.join(self.out, "nodebin", tool))
        self.prefix = os.path.join(self.out, "prefix")
        self.path = os.pathsep.join(
            [os.path.join(self.prefix, "bin"), os.path.join(self.out, "nodebin"), "/usr/bin", "/bin"])
        self.reg_log = os.path.join(self.out, "registry.log")
        self.server = fake_registry.serve(os.path.join(os.path.abspath(a.dist), "npm"), log=self.reg_log)
        self.registry = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.launcher = os.path.join(self.prefix, "bin", "wakeful")

    def env(self, **extra):
        env = {
            "PATH": self.path,
            "HOME": os.path.join(self.out, "empty"),
            "LANG": "C.UTF-8",
            "WAKEFUL_HOME": os.path.join(self.out, "wk"),
            "WAKEFUL_SESSION": "npm-e2e",
            "npm_config_registry": self.registry,
            "npm_config_cache": os.path.join(self.out, "cache"),
            "npm_config_prefix": self.prefix,
            "npm_config_audit": "false",
            "npm_config_fund": "false",
            "npm_config_update_notifier": "false",
        }
        env.update(extra)
        return env

    def run(self, argv, env=None, timeout=DEADLINE_S, **kw):
        return subprocess.run(argv, env=env or self.env(), cwd=os.path.join(self.out, "empty"),
                              capture_output=True, text=True, timeout=timeout, **kw)

    def requests(self):
        try:
            return open(self.reg_log).read().splitlines()
        except FileNotFoundError:
            return []

    def stop(self):
        subprocess.run([self.native, "daemon", "stop"], env=self.env(), capture_output=True)
        self.server.shutdown()


def platform_of_this_machine():
    import platform as p
    cpu = {"x86_64": "x64", "aarch64": "arm64"}.get(p.machine(), p.machine())
    libc = "glibc" if p.libc_ver()[0] == "glibc" else "musl"
    return f"@wakeful/linux-{cpu}-{'gnu' if libc == 'glibc' else 'musl'}"


def scenario_install(h):
    check(shutil.which("cargo", path=h.path) is None, "cargo is on the test PATH")
    r = h.run(["npm", "install", "-g", "wakeful"], timeout=120)
    check(r.returncode == 0, f"npm install -g wakeful failed: {r.stderr[-2000:]}")
    root = os.path.join(h.prefix, "lib", "node_modules", "wakeful")
    mods = os.path.join(root, "node_modules", "@wakeful")
    have = sorted(os.listdir(mods)) if os.path.isdir(mods) else []
    mine = platform_of_this_machine()
    check(have == [mine.split("/")[1]], f"installed platform packages {have}, wanted only {mine}")
    for pkg in [root, os.path.join(mods, have[0])]:
        scripts = json.load(open(os.path.join(pkg, "package.json"))).get("scripts", {})
        hooks = set(scripts) & {"preinstall", "install", "postinstall", "prepare"}
        check(not hooks, f"{pkg} has install scripts: {hooks}")
    optional = json.load(open(os.path.join(root, "package.json")))["optionalDependencies"]
    if h.decoy:
        check(h.decoy in optional, f"the decoy {h.decoy} is not an optional dependency: {optional}")
        check(any(f"/{h.decoy.replace('/', '%2f')} " in l or f"/{h.decoy} " in l for l in h.requests()),
              "npm did not even look the decoy up")
    r = h.run([h.launcher, "--version"])
    check(r.returncode == 0 and r.stdout.startswith(f"wakeful {h.version} "),
          f"wakeful --version said {r.stdout!r} {r.stderr!r}")
    return (f"npm installed {mine} only (optional: {', '.join(sorted(optional))}), no install "
            f"scripts; PATH without cargo; `wakeful --version`: {r.stdout.strip()}")


def scenario_npx(h):
    before = len(h.requests())
    r = h.run(["npx", "wakeful", "watch", "-d", "npx-global", "--", "echo npx-global-line"])
    check(r.returncode == 0 and "npx-global-line" in r.stdout, f"npx wakeful watch: {r.stdout} {r.stderr}")
    fetched = [l for l in h.requests()[before:] if ".tgz" in l]
    check(not fetched, f"npx fetched {fetched} although wakeful is installed globally")
    # Nothing installed, nothing cached: npx fetches it, as Claude Code's `npx -y wakeful mcp` does.
    env = h.env(PATH=os.pathsep.join([os.path.join(h.out, "nodebin"), "/usr/bin", "/bin"]),
                npm_config_cache=os.path.join(h.out, "cache-npx"),
                npm_config_prefix=os.path.join(h.out, "prefix-none"))
    r = h.run(["npx", "-y", f"wakeful@{h.version}", "watch", "-d", "npx-fresh", "--",
               "echo npx-fresh-line; exit 5"], env=env, timeout=120)
    check(r.returncode == 5 and "npx-fresh-line" in r.stdout,
          f"npx -y wakeful@{h.version} watch: rc {r.returncode}, {r.stdout} {r.stderr}")
    got = [l.split()[1] for l in h.requests() if l.endswith(" 200") and ".tgz" in l]
    check(any(f"{platform_of_this_machine()}/-/" in g for g in got), f"tarballs fetched: {got}")
    return ("`npx wakeful watch` ran the global install (nothing fetched); `npx -y "
            f"wakeful@{h.version} watch` from an empty cache fetched both tarballs and exited 5 as "
            "its command did")


def scenario_mcp(h):
    script = os.path.join(REPO, "tests/e2e/mcp-python/check.py")
    state = os.path.join(h.out, "wk-mcp")
    os.makedirs(state)
    env = dict(os.environ, PATH=h.path + os.pathsep + os.environ.get("PATH", ""))
    env.pop("WAKEFUL_SESSION", None)
    r = subprocess.run([sys.executable, script, h.launcher, state], env=env,
                       capture_output=True, text=True, timeout=120)
    subprocess.run([h.native, "daemon", "stop"], env=dict(env, WAKEFUL_HOME=state), capture_output=True)
    check(r.returncode == 0 and r.stdout.rstrip().endswith('{"ok": true}'),
          f"check.py through the launcher: {r.stdout[-1500:]} {r.stderr[-1500:]}")
    oks = [l for l in r.stdout.splitlines() if l.startswith("ok ")]
    return f"the MCP Python SDK against `wakeful mcp` through the launcher: {len(oks)} checks ok"


def ended(p):
    """A Popen's end as a shell tells it: the code, or 'signal N'."""
    return f"signal {-p.returncode}" if p.returncode < 0 else str(p.returncode)


def both(h, case):
    """Runs `case(binary)` with the native binary and with the launcher."""
    native, launched = case(h.native), case(h.launcher)
    check(native == launched, f"native ended with {native}, the launcher with {launched}")
    return launched


def scenario_exit_codes(h):
    def code(args, stdin=None):
        def case(binary):
            r = subprocess.run([binary, *args], env=h.env(), input=stdin, capture_output=True,
                               text=True, timeout=DEADLINE_S)
            return f"{r.returncode}" if r.returncode >= 0 else f"signal {-r.returncode}", r.stderr
        (end, err) = both(h, case)
        return end, err

    results = {}
    results["exit 7"], _ = code(["watch", "-d", "seven", "--", "exit 7"])
    check(results["exit 7"] == "7", f"watch of `exit 7`: {results['exit 7']}")
    results["usage"], _ = code(["watch", "--until", "nonsense", "--", "true"])
    check(results["usage"] == "2", f"bad --until: {results['usage']}")
    results["not found"], _ = code(["output", "mon-doesnotexist"])
    check(results["not found"] == "3", f"unknown monitor: {results['not found']}")
    results["stdin"], err = code(["hook", "stop"], stdin="not json\n")
    check(results["stdin"] == "1" and "stdin is not JSON" in err, f"hook stop on bad stdin: {err}")
    desc = "two words, ü and a 'quote'"
    r = subprocess.run([h.launcher, "--json", "start", "-d", desc, "--", "true"], env=h.env(),
                       capture_output=True, text=True, timeout=DEADLINE_S)
    check(r.returncode == 0, f"start: {r.stderr}")
    mid = json.loads(r.stdout)["id"]
    listed = json.loads(subprocess.run([h.native, "--json", "list"], env=h.env(),
                                       capture_output=True, text=True).stdout)
    check(any(m["id"] == mid and m["description"] == desc for m in listed),
          f"argv did not arrive unchanged: {listed}")

    def pipe_closed(binary):
        p = subprocess.Popen([binary, "completions", "bash"], env=h.env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        p.stdout.read(16)
        p.stdout.close()
        p.wait(DEADLINE_S)
        return ended(p), p.stderr.read()
    results["reader gone"], err = both(h, pipe_closed)
    check(results["reader gone"] in ("141", "signal 13") and not err,
          f"completions (117 kB) into a closed pipe: {results['reader gone']} {err!r}")

    def killed(binary):
        # A session of its own, with nothing pending: the wait blocks.
        session = f"kill-{os.path.basename(os.path.dirname(binary))}-{time.monotonic_ns()}"
        p = subprocess.Popen([binary, "wait", "--timeout-ms", "60000"],
                             env=h.env(WAKEFUL_SESSION=session),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        target = p.pid
        if binary == h.launcher:
            kids = f"/proc/{p.pid}/task/{p.pid}/children"
            wait_for(lambda: open(kids).read().split(), "the launcher's child")
            target = int(open(kids).read().split()[0])
        os.kill(target, signal.SIGKILL)
        p.wait(DEADLINE_S)
        return ended(p)
    results["SIGKILL"] = both(h, killed)
    check(results["SIGKILL"] == "signal 9", f"killed binary: {results['SIGKILL']}")
    # WAKEFUL_BINARY: another binary, and a clear error for a missing one.
    r = subprocess.run([h.launcher, "--version"], env=h.env(WAKEFUL_BINARY=h.native),
                       capture_output=True, text=True, timeout=DEADLINE_S)
    check(r.returncode == 0 and r.stdout.startswith("wakeful "), f"WAKEFUL_BINARY: {r}")
    r = subprocess.run([h.launcher, "--version"], env=h.env(WAKEFUL_BINARY="/nonexistent/wakeful"),
                       capture_output=True, text=True, timeout=DEADLINE_S)
    check(r.returncode == 1 and "wakeful: cannot run /nonexistent/wakeful" in r.stderr,
          f"a missing WAKEFUL_BINARY: {r.returncode} {r.stderr!r}")
    return "native and launcher ended alike: " + ", ".join(f"{k} → {v}" for k, v in results.items()) \
        + "; argv (spaces, ü, a quote) and stdin reached the binary; WAKEFUL_BINARY honoured"


def watch_then(h, binary, send, tag):
    """`wakeful watch -- sleep 60` in its own process group; `send(proc)` once
    it printed `started`; returns how it ended and whether its monitor stopped."""
    p = subprocess.Popen([binary, "watch", "-d", tag, "--", "sleep 60"], env=h.env(),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, process_group=0)
    first = p.stdout.readline()
    check(first.startswith(f"[wakeful] started: {tag}"), f"watch printed {first!r}")
    if binary == h.launcher:
        kids = f"/proc/{p.pid}/task/{p.pid}/children"
        wait_for(lambda: open(kids).read().split(), "the launcher's child")
    send(p)
    try:
        p.wait(DEADLINE_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        raise Failed(f"{tag}: watch did not end after the signal")
    listed = json.loads(subprocess.run([h.native, "--json", "list"], env=h.env(),
                                       capture_output=True, text=True).stdout)
    mon = [m for m in listed if m["description"] == tag]
    check(len(mon) == 1, f"{tag}: monitors {mon}")
    return ended(p), mon[0]["state"], mon[0].get("stop_reason", {}).get("kind")


def scenario_signals(h):
    cases = [
        ("Ctrl-C", lambda p: os.killpg(p.pid, signal.SIGINT), "130"),
        ("SIGINT to the launcher alone", lambda p: os.kill(p.pid, signal.SIGINT), "130"),
        ("SIGTERM to the launcher alone", lambda p: os.kill(p.pid, signal.SIGTERM), "143"),
    ]
    said = []
    for i, (name, send, want) in enumerate(cases):
        native = watch_then(h, h.native, send, f"sig-native-{i}")
        launched = watch_then(h, h.launcher, send, f"sig-npm-{i}")
        check(launched == native and launched[:2] == (want, "ended"),
              f"{name}: native {native}, launcher {launched}, wanted {want} and an ended monitor")
        said.append(f"{name} → {want}, monitor ended ({launched[2]})")
    return "; ".join(said) + " (the same as the native binary)"


def scenario_plugin(h):
    root = os.path.join(h.prefix, "lib", "node_modules", "wakeful")
    r = h.run([h.launcher, "--json", "validate", root])
    check(r.returncode == 0, f"wakeful validate of the package: {r.stdout} {r.stderr}")
    report = json.loads(r.stdout)
    check(report["errors"] == 0 and report["warnings"] == 0 and not report["diagnostics"],
          f"wakeful validate reported: {report}")
    own = '"${CLAUDE_PLUGIN_ROOT}/bin/wakeful"'
    hooks = json.load(open(os.path.join(root, "hooks/hooks.json")))["hooks"]
    commands = [x["command"] for groups in hooks.values() for g in groups for x in g["hooks"]]
    commands += [m["command"] for m in json.load(open(os.path.join(root, "monitors/monitors.json")))]
    check(commands and all(own in c for c in commands), f"commands not on the launcher: {commands}")
    mcp = json.load(open(os.path.join(root, ".mcp.json")))["mcpServers"]["wakeful"]
    check(mcp["command"] == "${CLAUDE_PLUGIN_ROOT}/bin/wakeful", f".mcp.json: {mcp}")
    manifest = json.load(open(os.path.join(root, ".claude-plugin/plugin.json")))
    check(manifest["version"] == h.version, f"plugin.json version {manifest['version']}")
    return (f"plugin {manifest['name']} {manifest['version']} at the package root: `wakeful "
            f"validate` clean; {len(commands)} hook/monitor commands and the MCP server run "
            "${CLAUDE_PLUGIN_ROOT}/bin/wakeful")


SCENARIOS = [("install", scenario_install), ("npx", scenario_npx), ("mcp", scenario_mcp),
             ("exit-codes", scenario_exit_codes), ("signals", scenario_signals),
             ("plugin", scenario_plugin)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dist", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--native", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--decoy")
    a = ap.parse_args()
    started = time.time()
    h = Harness(a)
    npm = subprocess.run(["npm", "--version"], capture_output=True, text=True).stdout.strip()
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    failed = False
    try:
        for name, scenario in SCENARIOS:
            t0 = time.time()
            try:
                what = scenario(h)
                print(f"PASS {name} ({time.time() - t0:.1f}s): {what}", flush=True)
            except (Failed, OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
                print(f"FAIL {name}: {e}", flush=True)
                failed = True
                if name == "install":
                    break
    finally:
        h.stop()
    print(f"npm {npm}, node {node}: {'failed' if failed else 'all scenarios passed'} in "
          f"{time.time() - started:.1f}s (logs in {h.out})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
