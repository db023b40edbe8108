#!/usr/bin/env python3
"""How fast a background line wakes an idle interactive Claude Code session.

Usage:
    cargo build -p wakeful-cli
    CLAUDE_BIN=/path/to/claude python3 bench/claude_wake_latency.py \\
        [target/debug/wakeful] [--samples 10] [--gap 3] [--out /tmp/cwl] \\
        [--variants wakeful,cc-monitor]

Runs the real Claude Code TUI (tests/e2e/claude-code/tui.py: tmux, an
isolated HOME, the fake Anthropic API that records every request with its
wall-clock time) once per variant, one after the other in the same run. In each, a
command prints one line every --gap seconds, --samples times, while the
session is idle, and writes the wall-clock time of each line (bash
$EPOCHREALTIME, just before the echo) to a stamp file. The clock of a sample
runs from that line to the first model request that carries it.

Variants:
  wakeful          the shipped plugin (integrations/claude-code) loaded with
                   --plugin-dir; the lines come from a wakeful monitor of the
                   session, started once the session's hook and bridge wait.
  cc-monitor       Claude Code's own plugin monitor: a plugin whose
                   monitors/monitors.json runs the line printer.
  wakeful-bridge   the shipped plugin without hooks/ (the bridge alone).
  wakeful-project  the shipped plugin installed at project scope,
                   <project>/.claude/skills/wakeful/ (Claude Code drops its
                   monitor there; only the hooks run).
  mcp-task         no plugin: `wakeful mcp` alone (--mcp-config, MCP
                   2026-07-28). The model calls monitor_wait, which Claude
                   Code runs as a background task; the lines come from a
                   wakeful monitor of the session, started once the task
                   waits; each completed task starts a turn in which the
                   model calls monitor_wait again.

Exactly once: every line's text (`wkl-07-end`) is counted in the user
content of each main-loop request; what a request adds over the most the
requests before it held is new. Each line must be new in exactly one
request, and through which path (rewake hook, monitor notification, Stop
hook) is reported. Exit 1 when a line was never delivered or delivered
twice.

Environment: CLAUDE_BIN (default $WAKEFUL_CLAUDE_BIN, else
target/claude-e2e/npm/node_modules/.bin/claude, where .ci/run installs Claude
Code 2.1.332). Python 3.11 standard library, tmux. Everything is written under
--out (default /tmp/cwl).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "tests" / "e2e" / "claude-code"))
from benchlib import pct as percentile  # noqa: E402
from tui import Failed, Tui  # noqa: E402
PLUGIN = REPO / "integrations" / "claude-code"
MARK = ".claude-wake-latency"

LINES_SH = r"""#!/usr/bin/env bash
# lines.sh PREFIX STAMPS N GAP DELAY: N lines PREFIX-NN-end, GAP s apart.
prefix=$1 stamps=$2 n=$3 gap=$4 delay=$5
sleep "$delay"
for i in $(seq 1 "$n"); do
  sleep "$gap"
  m=$(printf '%s-%02d-end' "$prefix" "$i")
  echo "$EPOCHREALTIME $m" >>"$stamps"
  echo "$m"
done
sleep 3600
"""


def die(msg: str) -> None:
    print(f"claude_wake_latency: {msg}", file=sys.stderr)
    sys.exit(2)


def texts(content) -> list[str]:
    if isinstance(content, str):
        return [content]
    out = []
    for b in content or []:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text":
            out.append(b.get("text", ""))
        elif b.get("type") == "tool_result":
            out += texts(b.get("content"))
    return out


def path_of(text: str, marker: str) -> str:
    """Which path carried the newest `marker`, from the text before it."""
    i = text.rfind(marker)
    before = text[max(0, i - 20000):i]
    cut = max(before.rfind("<task-notification>"), before.rfind("Stop hook feedback:\n"))
    head = before[cut:] if cut >= 0 else before
    if "Monitor event" in head:
        return "monitor notification"
    if "hook blocking error from command" in head:
        return "rewake hook"
    if head.startswith("Stop hook feedback:\n"):
        return "Stop hook"
    if head.startswith("<task-notification>"):
        return "MCP task"
    return "other"


def run_variant(args, name: str, wakeful: Path, bindir: Path) -> dict:
    root = args.out
    out = root / name
    stamps = root / f"{name}.stamps"
    stamps.unlink(missing_ok=True)
    sid = str(uuid.uuid4())
    wkhome = root / f"wk-{name}"
    shutil.rmtree(wkhome, ignore_errors=True)
    prefix = {"wakeful": "wkl", "cc-monitor": "ccl", "wakeful-bridge": "wbl",
              "wakeful-project": "wpl", "mcp-task": "mtl"}[name]
    lines_cmd = f"bash {root / 'lines.sh'} {prefix} {stamps} {args.samples} {args.gap}"
    empty = root / "empty-plugin"
    plugin, project = PLUGIN, None
    if name == "wakeful-bridge":
        plugin = root / "plugin-bridge"
        shutil.rmtree(plugin, ignore_errors=True)
        shutil.copytree(PLUGIN, plugin)
        shutil.rmtree(plugin / "hooks")
    elif name == "wakeful-project":
        project = root / "project"
        shutil.rmtree(project, ignore_errors=True)
        (project / ".claude" / "skills").mkdir(parents=True)
        shutil.copytree(PLUGIN, project / ".claude" / "skills" / "wakeful")
        # The answer "Use this MCP server" to Claude Code's question about
        # the plugin's MCP server (asked once per project, before anything
        # else runs), as Claude Code stores it.
        (project / ".claude" / "settings.local.json").write_text(
            json.dumps({"enabledMcpjsonServers": ["plugin:wakeful:wakeful"]}))
        plugin = empty
    elif name == "cc-monitor":
        plugin = root / "cc-plugin"
        shutil.rmtree(plugin, ignore_errors=True)
        (plugin / ".claude-plugin").mkdir(parents=True)
        (plugin / "monitors").mkdir()
        (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps(
            {"name": "cc-lines", "version": "0.0.1", "description": "bench lines"}))
        # The TUI is up within ~5 s; the first line comes after 8 + gap s.
        (plugin / "monitors" / "monitors.json").write_text(json.dumps([{
            "name": "lines", "description": "bench lines", "when": "always",
            "command": lines_cmd + " 8"}]))
    elif name == "mcp-task":
        plugin = empty
    elif name != "wakeful":
        die(f"unknown variant {name}")
    shutil.rmtree(out, ignore_errors=True)
    claude_args, script = ["--session-id", sid], []
    if name == "mcp-task":
        out.mkdir(parents=True)
        (out / "mcp.json").write_text(json.dumps({"mcpServers": {"wakeful": {
            "command": str(wakeful), "args": ["mcp"],
            "env": {"WAKEFUL_HOME": str(wkhome), "WAKEFUL_SESSION": sid}}}}))
        claude_args += ["--mcp-config", str(out / "mcp.json"), "--strict-mcp-config",
                        "--allowedTools", "mcp__wakeful__monitor_wait"]
        wait = {"tool": "mcp__wakeful__monitor_wait", "input": {}}
        done = {"text": "Waiting in the background; ending my turn."}
        script = [dict(wait, when="wait-for-lines"), done] + [wait, done] * args.samples
    tui = Tui(args.claude, out, plugin, path_dirs=[bindir] + os.environ["PATH"].split(":"),
              env={"WAKEFUL_HOME": str(wkhome)}, args=claude_args, project=project,
              script=script)
    last = f"{prefix}-{args.samples:02d}-end"
    note = "ok"
    try:
        with tui:
            tui.wait_ready()
            if name == "mcp-task":
                tui.type_prompt("wait-for-lines")
            if name.startswith("wakeful") or name == "mcp-task":
                # Start the lines once the session's paths wait: the rewake hook
                # and the bridge (one of them where the variant has only one),
                # or the task's wait.
                want = 2 if name == "wakeful" else 1
                consumer = "mcp" if name == "mcp-task" else "claude"
                wk = [str(wakeful), "--session", sid]
                wkenv = dict(os.environ, WAKEFUL_HOME=str(wkhome))

                def waiting(_reqs):
                    r = subprocess.run(wk + ["consumers", "--json"], env=wkenv,
                                       capture_output=True, text=True)
                    rows = json.loads(r.stdout or "[]") if r.returncode == 0 else []
                    return any(c["consumer"] == consumer and c["waiters"] >= want for c in rows)
                tui.wait_until(waiting, 60, f"{name}: a waiter of consumer {consumer}")
                subprocess.run(wk + ["start", "-d", "bench lines", "--timeout-ms", "3600000", "--",
                                     lines_cmd + " 1"], env=wkenv, check=True, capture_output=True)
            tui.wait_until(lambda reqs: any(last in r["new"] for r in reqs),
                           8 + args.samples * args.gap + 20, f"{name}: {last} reached the model")
            time.sleep(1)  # a moment for a second delivery of the last line to show
    except Failed as e:
        note = str(e)
    if name.startswith("wakeful") or name == "mcp-task":
        subprocess.run([str(wakeful), "daemon", "stop"], env=dict(os.environ, WAKEFUL_HOME=str(wkhome)),
                       capture_output=True)
    return analyse(name, out, stamps, args.samples, prefix, [note])


def analyse(name, out, stamps, n, prefix, harness_tail) -> dict:
    reqs = [json.loads(l) for l in (out / "requests.jsonl").read_text().splitlines() if l.strip()]
    stamp = {}
    if stamps.exists():
        for l in stamps.read_text().splitlines():
            t, m = l.split()
            stamp[m] = float(t)
    markers = [f"{prefix}-{i:02d}-end" for i in range(1, n + 1)]
    main = [r for r in reqs if r.get("main_loop")]
    seen = {m: 0 for m in markers}
    deliveries = {m: [] for m in markers}
    for r in main:
        user = "\n".join(t for msg in r["body"].get("messages", []) if msg.get("role") != "assistant"
                         for t in texts(msg.get("content")))
        for m in markers:
            c = user.count(m)
            if c > seen[m]:
                deliveries[m] += [(r["i"], r["ts"], path_of(user, m))] * (c - seen[m])
                seen[m] = c
    lat, paths, problems = [], {}, []
    for m in markers:
        d = deliveries[m]
        if m not in stamp:
            problems.append(f"{m}: never printed")
            continue
        if len(d) != 1:
            problems.append(f"{m}: delivered {len(d)} times {d}")
        if d:
            i, t, p = d[0]
            lat.append((t - stamp[m]) * 1000)
            paths[p] = paths.get(p, 0) + 1
    res = {"variant": name, "samples": len(lat), "latency_ms": [round(x, 1) for x in lat],
           "paths": paths, "problems": problems,
           "requests": len(reqs), "harness": harness_tail, "out": str(out)}
    if lat:
        res.update(median=round(statistics.median(lat), 1), p90=round(percentile(lat, 90), 1),
                   max=round(max(lat), 1), min=round(min(lat), 1))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wakeful", nargs="?", default=str(REPO / "target" / "debug" / "wakeful"))
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--gap", type=float, default=3.0)
    ap.add_argument("--out", default="/tmp/cwl")
    ap.add_argument("--variants", default="wakeful,cc-monitor")
    args = ap.parse_args()
    args.out = Path(args.out)
    args.claude = os.environ.get("CLAUDE_BIN") or os.environ.get("WAKEFUL_CLAUDE_BIN") or str(
        REPO / "target" / "claude-e2e" / "npm" / "node_modules" / ".bin" / "claude")
    if not os.access(args.claude, os.X_OK):
        die(f"CLAUDE_BIN {args.claude} is not executable (see tests/e2e/claude-code/README.md)")
    if not shutil.which("tmux"):
        die("tmux not found (apt-get install tmux)")
    wakeful = Path(args.wakeful).resolve()
    if not os.access(wakeful, os.X_OK):
        die(f"{wakeful} is not executable; cargo build -p wakeful-cli first")
    if args.out.exists():
        if not (args.out / MARK).exists():
            die(f"{args.out} exists and was not made by this script; pick another --out")
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    (args.out / MARK).touch()
    (args.out / "lines.sh").write_text(LINES_SH)
    empty = args.out / "empty-plugin" / ".claude-plugin"
    empty.mkdir(parents=True)
    (empty / "plugin.json").write_text(json.dumps({"name": "bench-empty", "version": "0.0.1"}))
    # The hooks and the bridge run `wakeful` from PATH: this build, first.
    bindir = args.out / "bin"
    bindir.mkdir()
    shutil.copy2(wakeful, bindir / "wakeful")
    results = []
    for name in args.variants.split(","):
        r = run_variant(args, name, bindir / "wakeful", bindir)
        results.append(r)
        print(json.dumps(r), flush=True)
    print()
    print(f"| variant | samples | median (ms) | p90 (ms) | max (ms) | min (ms) | delivered by |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        paths = ", ".join(f"{p} {n}" for p, n in sorted(r["paths"].items()))
        print(f"| {r['variant']} | {r['samples']} | {r.get('median', '–')} | {r.get('p90', '–')} "
              f"| {r.get('max', '–')} | {r.get('min', '–')} | {paths} |")
    bad = [p for r in results for p in r["problems"]]
    for p in bad:
        print(f"claude_wake_latency: {p}", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
