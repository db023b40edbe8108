#!/usr/bin/env python3
"""Instructions the daemon executes per line: a count that does not move
with the machine's load (unlike time), for comparing two builds.

Usage:
    cargo build --release -p wakeful-cli
    python3 bench/daemon_instructions.py [target/release/wakeful] [--lines 200] [--keep FILE]

The daemon runs under `valgrind --tool=callgrind` (started through
WAKEFUL_DAEMON_EXE). 20 `cat FIFO` monitors, `--batch-ms 0`, each get a
warm-up line; the counts are zeroed (`callgrind_control --zero`), then
--lines lines are written round-robin, 30 ms apart, each read back by
`wakeful --json events --follow`; the counts are dumped (`callgrind_control
--dump`) and the total is divided by the lines. Every thread of the daemon
counts (the monitors' worker and the blocking thread that folds into
SQLite); the kernel does not. Use a build of the `profiling` profile and
--keep to look at the functions (`callgrind_annotate --inclusive=yes FILE`).
Needs valgrind (Debian: valgrind).
"""

from __future__ import annotations

import argparse
import glob
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as db  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("wakeful", nargs="?", default=str(db.REPO / "target/release/wakeful"))
    ap.add_argument("--lines", type=int, default=200)
    ap.add_argument("--keep", metavar="FILE", help="keep the callgrind dump as FILE")
    args = ap.parse_args()
    for tool in ("valgrind", "callgrind_control", "callgrind_annotate"):
        if shutil.which(tool) is None:
            print(f"`{tool}` is required (Debian: valgrind)", file=sys.stderr)
            return 2
    exe = str(Path(args.wakeful).resolve())
    out = Path(tempfile.mkdtemp(prefix="wakeful-callgrind-"))
    wrapper = out / "daemon.sh"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"exec valgrind --tool=callgrind --callgrind-out-file={out}/cg.%p {exe} \"$@\"\n"
    )
    wrapper.chmod(0o755)
    home = db.Home(exe, "callgrind", 250)
    home.env["WAKEFUL_DAEMON_EXE"] = str(wrapper)
    try:
        lines = db.wakeful_latency(home, 20, args.lines, 0, 0.030, "cg", "cg")
        next(lines)  # the monitors, their warm-up lines and the first sample
        pid = str(home.daemon_pid)
        subprocess.run(["callgrind_control", "--zero", pid], check=True, capture_output=True)
        try:
            while True:
                time.sleep(0.030)
                next(lines)
        except StopIteration as done:
            res = done.value
        subprocess.run(["callgrind_control", "--dump", pid], check=True, capture_output=True)
    finally:
        home.close(False)
    dumps = sorted(glob.glob(str(out / "cg.*.1")))
    if not dumps:
        print(f"no callgrind dump in {out}", file=sys.stderr)
        return 1
    report = subprocess.run(["callgrind_annotate", dumps[0]], capture_output=True, text=True).stdout
    m = re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", report)
    if m is None:
        print(report, file=sys.stderr)
        return 1
    total = int(m.group(1).replace(",", ""))
    n = len(res["samples"]) - 1  # the first sample came before the zeroing
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{version}: {total:,} instructions for {n} lines (lost {res['lost']}): {total / n:,.0f} a line")
    if args.keep:
        shutil.copy(dumps[0], args.keep)
        print(f"callgrind dump: {args.keep}")
    shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
