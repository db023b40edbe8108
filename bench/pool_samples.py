#!/usr/bin/env python3
"""Pools the latency samples of several `daemon_bench.py --samples-out` files.

Usage:
    python3 bench/pool_samples.py [NAME=]A1.json[,A2.json…] [[NAME=]B1.json[,B2.json…]]

Each argument is one build's files, comma-separated, optionally named
(`new=a.json,b.json`): several invocations of
`daemon_bench.py … --latency-only --runs K --samples-out FILE`, for builds
compared by alternating invocations. For each build: the ratio rows of
`daemon_bench.py` over all its runs' samples pooled (median / p99), each
run's own range beside them, each target's like-for-like comparisons
(`benchlib.TARGETS`), and the percentiles of the main paths. Python
3.11 standard library only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as db  # noqa: E402

PERCENTILES = (10, 50, 90, 99)
SHOWN = ("a0", "a0t", "a0d", "a0m", "a0md", "a_file", "a_tailcat", "a_tailcatf", "a_tail")


def load(files: str) -> list[dict]:
    """Every run of every file, each a dict of path → samples (ns)."""
    return [run for f in files.split(",") for run in json.loads(Path(f).read_text())]


def ratio(a: list[int], b: list[int], p: float) -> float:
    return db.pct(a, p) / db.pct(b, p)


def report(name: str, runs: list[dict]) -> None:
    pooled: dict[str, list[int]] = {}
    for run in runs:
        for path, samples in run.items():
            pooled.setdefault(path, []).extend(samples)
    print(f"### {name}: {len(runs)} runs, {len(pooled.get('a0', []))} samples a path\n")
    print("| ratio | pooled median / p99 | runs' medians | runs' p99s |")
    print("|---|---:|---:|---:|")
    for path, base in db.RATIOS:
        if not pooled.get(path) or not pooled.get(base):
            continue
        per = [(ratio(r[path], r[base], 50), ratio(r[path], r[base], 99)) for r in runs]
        meds, p99s = [m for m, _ in per], [p for _, p in per]
        print(
            f"| {db.PATH_NAMES[path]} ÷ {db.BASELINE_NAMES[base]} "
            f"| {ratio(pooled[path], pooled[base], 50):.2f} / {ratio(pooled[path], pooled[base], 99):.2f} "
            f"| {min(meds):.2f}–{max(meds):.2f} | {min(p99s):.2f}–{max(p99s):.2f} |"
        )
    print()
    db.print_targets(pooled)
    print("\n| path | " + " | ".join(f"p{p}" for p in PERCENTILES) + " |")
    print("|---|" + "---:|" * len(PERCENTILES))
    for path in SHOWN:
        if pooled.get(path):
            cells = " | ".join(f"{db.pct(pooled[path], p) / 1000:.0f}" for p in PERCENTILES)
            print(f"| `{path}` | {cells} |")
    print()


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    for default, arg in zip(("first build", "second build"), sys.argv[1:]):
        name, _, files = arg.rpartition("=")
        report(name or default, load(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
