#!/usr/bin/env python3
"""ACP wake latency beside the Claude Code plugin's, in one run.

Usage:
    python3 bench/acp_wake_latency.py target/release/wakeful --npm DIR --claude BIN \\
        [--rounds 5] [--out /tmp/awl]

Each round runs, one after the other, so that the machine's drift weighs on all alike:
  - tests/e2e/acp/run.py (codex-acp and claude-agent-acp behind `wakeful acp-proxy`, the
    ACP TypeScript SDK as the editor, fake model APIs): one sample per agent, from the
    monitor's line to the agent's new turn request at the fake model;
  - bench/claude_wake_latency.py --variants wakeful (the shipped plugin in the real
    Claude Code TUI, idle): three samples, from the line to the model request that
    carries it.
--npm is the npm prefix of the ACP parts (.ci/run's WAKEFUL_ACP_E2E_DIR), --claude the
Claude Code 2.1.332 executable. Prints a Markdown table. Standard library only.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def acp_round(args, n):
    out = Path(args.out) / f"acp-{n}"
    run = subprocess.run(
        [sys.executable, str(REPO / "tests/e2e/acp/run.py"), "--npm", args.npm, "--claude",
         args.claude, "--wakeful", args.wakeful, "--out", str(out)],
        capture_output=True, text=True, timeout=600)
    found = {}
    for m in re.finditer(r"^PASS (\S+) .*?wake latency ([\d.]+) ms", run.stdout, re.M):
        found[m.group(1)] = float(m.group(2))
    if run.returncode != 0:
        print(f"acp round {n} failed:\n{run.stdout}\n{run.stderr}", file=sys.stderr)
    return found


def plugin_round(args, n):
    out = Path(args.out) / f"plugin-{n}"
    run = subprocess.run(
        [sys.executable, str(REPO / "bench/claude_wake_latency.py"), args.wakeful, "--samples",
         "3", "--gap", "2", "--variants", "wakeful", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, CLAUDE_BIN=args.claude))
    for line in run.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line).get("latency_ms", [])
    print(f"plugin round {n} failed:\n{run.stdout}\n{run.stderr}", file=sys.stderr)
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wakeful")
    ap.add_argument("--npm", required=True)
    ap.add_argument("--claude", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="/tmp/awl")
    args = ap.parse_args()
    args.wakeful = str(Path(args.wakeful).resolve())
    samples = {"codex-acp": [], "claude-agent-acp": [], "plugin": []}
    for n in range(args.rounds):
        for agent, ms in acp_round(args, n).items():
            samples.setdefault(agent, []).append(ms)
        samples["plugin"] += plugin_round(args, n)
    names = {"codex-acp": "ACP: `acp-proxy` → codex-acp 0.16.0",
             "claude-agent-acp": "ACP: `acp-proxy` → claude-agent-acp 0.23.1 (Claude Code 2.1.332)",
             "plugin": "Claude Code 2.1.332 TUI with the shipped plugin (idle session)"}
    print("| path | samples | median (ms) | min | max |")
    print("|---|---:|---:|---:|---:|")
    for key, v in samples.items():
        if v:
            print(f"| {names.get(key, key)} | {len(v)} | {statistics.median(v):.0f} | "
                  f"{min(v):.0f} | {max(v):.0f} |")
    return 0 if all(samples.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
