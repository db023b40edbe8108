#!/usr/bin/env python3
"""Daemon CPU per event: what one line costs the daemon, wake-ups included.

Usage:
    cargo build --release -p wakeful-cli
    python3 bench/daemon_cpu.py [target/release/wakeful] [--perf-record FILE]

20 monitors (`cat FIFO`, `--batch-ms 0`, one session each, so that no session
limit or rate limit applies) get 15 lines each, one write(2) a line, 10 ms
apart; `perf stat` counts the daemon's task-clock and context switches over
those 300 lines. With --perf-record FILE it records a call graph instead (use
a build of the `profiling` profile for symbols: `cargo build --profile
profiling -p wakeful-cli`, then pass target/profiling/wakeful). Needs `perf`.
A temporary WAKEFUL_HOME; its daemon is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("wakeful", nargs="?", default=str(REPO / "target/release/wakeful"))
    ap.add_argument("--perf-record", metavar="FILE", help="record a call graph into FILE instead of counting")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        print("perf is not installed (Debian: linux-perf)", file=sys.stderr)
        return 2
    home = Path(tempfile.mkdtemp(prefix="wakeful-cpu-"))
    env = dict(os.environ, WAKEFUL_HOME=str(home))

    def wk(*a: str) -> subprocess.CompletedProcess:
        return subprocess.run([args.wakeful, *a], env=env, capture_output=True, text=True, check=True)

    fds = []
    try:
        pid = str(json.loads(wk("--json", "status").stdout)["pid"])
        for k in range(20):
            fifo = home / f"f{k}"
            os.mkfifo(fifo)
            wk("--session", f"s{k}", "start", "--batch-ms", "0", "--", "cat", str(fifo))
            fds.append(os.open(fifo, os.O_WRONLY))
        time.sleep(1)  # let the starts settle: only the lines are measured
        if args.perf_record:
            cmd = ["perf", "record", "-F", "20000", "-g", "--call-graph", "dwarf,16384", "-o", args.perf_record, "-p", pid]
        else:
            cmd = ["perf", "stat", "-e", "task-clock,context-switches", "-p", pid]
        perf = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)  # perf attaches
        n = 0
        for _ in range(15):
            for fd in fds:
                os.write(fd, b"probe-%d\n" % n)
                n += 1
                time.sleep(0.01)
        time.sleep(0.3)  # the last line is committed
        perf.send_signal(2)
        _, err = perf.communicate()
        if args.perf_record:
            print(f"{n} lines recorded into {args.perf_record}")
            return 0
        for line in err.splitlines():
            if "task-clock" in line:
                ms = float(line.split()[0].replace(",", ""))
                print(f"{n} lines: {ms:.1f} ms of daemon CPU, {ms * 1000 / n:.0f} µs a line")
            elif "context-switches" in line:
                print(f"{n} lines: {int(line.split()[0].replace(',', ''))} context switches of the daemon")
        return 0
    finally:
        for fd in fds:
            os.close(fd)
        subprocess.run([args.wakeful, "daemon", "stop"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
