#!/usr/bin/env python3
"""Daemon CPU per event: what one line costs the daemon, wake-ups included.

Usage:
    cargo build --release -p wakeful-cli
    python3 bench/daemon_cpu.py [target/release/wakeful] [--gap-ms 10 …] [--in-turn] [--perf-record FILE]

20 monitors (`cat FIFO`, `--batch-ms 0`, one session each, so that no session
limit or rate limit applies) get 15 lines each, one write(2) a line, 10 ms
apart (`--gap-ms`, repeatable: one pass of 300 lines per gap), round-robin
over the monitors or, with `--in-turn`, 15 lines to one monitor after
another (a monitor's task, pipe and output file then stay warm). Per pass, from
/proc: each daemon thread's processor time and context switches (voluntary,
and involuntary: preempted) a line, and the daemon's minor page faults a
line; and, when `perf` is installed, `perf stat`'s task-clock and context
switches of the whole daemon. With --perf-record FILE it records a call graph
of the first pass instead (use a build of the `profiling` profile for
symbols: `cargo build --profile profiling -p wakeful-cli`, then pass
target/profiling/wakeful; needs `perf`). A temporary WAKEFUL_HOME; its daemon
is stopped at the end.

How a thread's time a line grows with the gap shows how much of it is the
line's work and how much the cost of finding a cold processor (caches, TLBs,
the switch in).
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


def threads(pid: str) -> dict[str, tuple[str, int, int, int]]:
    """Each thread's name, processor time (ns, /proc/…/schedstat) and
    voluntary and involuntary context switches."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{tid}"
        try:
            comm = Path(f"{base}/comm").read_text().strip()
            ns = int(Path(f"{base}/schedstat").read_text().split()[0])
            status = Path(f"{base}/status").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        counts = {k: int(v) for k, v in (l.split(":") for l in status.splitlines() if "ctxt_switches" in l)}
        out[tid] = (comm, ns, counts["voluntary_ctxt_switches"], counts["nonvoluntary_ctxt_switches"])
    return out


def minor_faults(pid: str) -> int:
    """The process's minor page faults so far (/proc/PID/stat, field 10)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("wakeful", nargs="?", default=str(REPO / "target/release/wakeful"))
    ap.add_argument("--perf-record", metavar="FILE", help="record a call graph into FILE instead of counting")
    ap.add_argument("--gap-ms", type=float, action="append", help="ms between lines (repeatable; default 10)")
    ap.add_argument("--in-turn", action="store_true", help="15 lines to one monitor after another, not round-robin")
    args = ap.parse_args()
    gaps = args.gap_ms or [10.0]
    have_perf = shutil.which("perf") is not None
    if args.perf_record and not have_perf:
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
        n = 0
        for gap in gaps:
            if args.perf_record:
                cmd = ["perf", "record", "-F", "20000", "-g", "--call-graph", "dwarf,16384", "-o", args.perf_record, "-p", pid]
            else:
                cmd = ["perf", "stat", "-e", "task-clock,context-switches", "-p", pid]
            perf = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True) if have_perf else None
            time.sleep(0.5)  # perf attaches
            before = threads(pid), minor_faults(pid)
            lines = 0
            order = [fd for fd in fds for _ in range(15)] if args.in_turn else [fd for _ in range(15) for fd in fds]
            for fd in order:
                os.write(fd, b"probe-%d\n" % n)
                n += 1
                lines += 1
                time.sleep(gap / 1000)
            time.sleep(0.3)  # the last line is committed
            after = threads(pid), minor_faults(pid)
            err = ""
            if perf is not None:
                perf.send_signal(2)
                _, err = perf.communicate()
            if args.perf_record:
                print(f"{lines} lines recorded into {args.perf_record}")
                return 0
            print(f"lines {gap:g} ms apart ({lines}):")
            for tid, (comm, ns, vol, invol) in sorted(after[0].items()):
                b = before[0].get(tid, (comm, 0, 0, 0))
                if ns > b[1]:
                    print(
                        f"  thread {tid} ({comm}): {(ns - b[1]) / 1000 / lines:.1f} µs a line, "
                        f"{(vol - b[2]) / lines:.2f} voluntary + {(invol - b[3]) / lines:.2f} involuntary switches a line"
                    )
            print(f"  minor page faults: {(after[1] - before[1]) / lines:.2f} a line")
            for line in err.splitlines():
                if "task-clock" in line:
                    ms = float(line.split()[0].replace(",", ""))
                    print(f"  perf stat: {ms:.1f} ms of daemon CPU, {ms * 1000 / lines:.0f} µs a line")
                elif "context-switches" in line:
                    print(f"  perf stat: {int(line.split()[0].replace(',', ''))} context switches of the daemon")
        return 0
    finally:
        for fd in fds:
            os.close(fd)
        subprocess.run([args.wakeful, "daemon", "stop"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
