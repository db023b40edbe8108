#!/usr/bin/env python3
"""The flood of daemon_bench.py (d) for two builds side by side.

Usage:
    python3 bench/flood_builds.py NEW_WAKEFUL OLD_WAKEFUL [--runs 4]

Each round runs `seq 10000000` as a `wakeful watch` monitor under each build
(a fresh WAKEFUL_HOME each, `[store] output_max = "256MiB"` so that the output
is kept whole), the order alternating round by round, against
`seq 10000000 | cat | cat > file` in the same round. Prints, per build, the
ranges of: output equal to the generator's, delivered + suppressed,
`started` -> `stopped` (the daemon's clock), the whole `watch` call, the
pipeline, the daemon's peak RSS (VmHWM), and after the run its own memory
(RssAnon) and the file pages it maps (RssFile: its binary, libc).
Standard library only.
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import daemon_bench  # noqa: E402
from benchlib import Home  # noqa: E402

LINES = 10_000_000


def span(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}–{fmt.format(hi)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("new")
    ap.add_argument("old")
    ap.add_argument("--runs", type=int, default=4)
    args = ap.parse_args()
    builds = {"new": args.new, "old": args.old}
    results: dict[str, list[dict]] = {"new": [], "old": []}
    for r in range(args.runs):
        for name in ("new", "old") if r % 2 == 0 else ("old", "new"):
            home = Home(builds[name], f"flood-{name}")
            (home.dir / "config.toml").write_text('[store]\noutput_max = "256MiB"\n')
            try:
                d = daemon_bench.flood(home, LINES)
            finally:
                home.close(False)
            results[name].append(d)
            print(name, json.dumps(d), file=sys.stderr, flush=True)
    print("| build | output | delivered + suppressed | `started` → `stopped` | whole `watch` call | pipeline | daemon peak RSS | after: own + file pages |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for name, rs in results.items():
        equal = "equal to the generator's" if all(d["sha_equal"] for d in rs) else "DIFFERS"
        counts = {(d["delivered"], d["suppressed"]) for d in rs}
        total = " / ".join(f"{a:,} + {b:,}" for a, b in sorted(counts))
        if any(d["delivered"] + d["suppressed"] != LINES for d in rs):
            total += f" (NOT {LINES:,})"
        print(
            f"| {name} ({builds[name]}) | {equal} | {total} "
            f"| {span([d['pipeline_s'] for d in rs], '{:.2f}')} s "
            f"| {span([d['wakeful_s'] for d in rs], '{:.2f}')} s "
            f"| {span([d['baseline_s'] for d in rs], '{:.2f}')} s "
            f"| {span([d['peak_rss_mib'] for d in rs], '{:.1f}')} MiB "
            f"| {span([d['anon_mib'] for d in rs], '{:.1f}')} + {span([d['file_mib'] for d in rs], '{:.1f}')} MiB |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
